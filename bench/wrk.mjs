/**
 * wrk as the load generator of bench/account.mjs (--generator wrk), beside autocannon.
 *
 * Why offer it: a load generator that is never idle spares the server it loads the kernel's work of
 * waking it, which on a VM is an interrupt to a halted vCPU; one that often waits makes every response
 * pay for it. autocannon is busy all the time against the bare server and idle half the time against
 * Nimbus, so only Nimbus pays; wrk waits on both. That moves the ratio only while the servers have CPU
 * to spare, and neither is how remote clients load a server: docs/benchmarks.md has runs with both.
 */
import { execFile, spawnSync } from 'node:child_process';
import { cpuSeconds, fail, LOAD_CPU, serverCpu, step } from './lib.mjs';

/** The installed wrk's version ("wrk 4.1.0"); fails the run with how to install it when there is none. */
export function wrkVersion() {
  const probe = spawnSync('wrk', ['-v'], { encoding: 'utf8' });
  if (probe.error)
    fail('wrk is not installed: apt-get install wrk (Debian, Ubuntu) or brew install wrk (macOS)');
  // wrk -v prints its version and exits with status 1.
  return /wrk \S+/.exec(`${probe.stdout}${probe.stderr}`)?.[0] ?? 'wrk';
}

function wrkOutput(args, pin) {
  const [command, commandArgs] = pin ? ['taskset', ['-c', String(LOAD_CPU), 'wrk', ...args]] : ['wrk', args];
  return new Promise((resolve, reject) => {
    execFile(command, commandArgs, { encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`wrk failed: ${stderr || error.message}`));
      else resolve(stdout);
    });
  });
}

/** "812.00us", "2.80ms", "1.02s" → milliseconds. */
function milliseconds(text) {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text);
  if (!match) throw new Error(`unexpected wrk latency "${text}"`);
  const scale = { us: 0.001, ms: 1, s: 1000, m: 60_000 }[match[2]];
  return Math.round(Number(match[1]) * scale * 1000) / 1000;
}

/**
 * What wrk printed, as figures; throws on output it does not recognise rather than guessing. Socket
 * errors and answers outside 2xx/3xx fail the run: a server that refuses fast must not look fast.
 */
function parseWrk(output) {
  const totals = /(\d+) requests in ([\d.]+)(ms|s|m),/.exec(output);
  if (!totals) throw new Error(`unexpected wrk output:\n${output}`);
  const seconds = milliseconds(`${totals[2]}${totals[3]}`) / 1000;
  const percentile = (p) => {
    const match = new RegExp(`^\\s+${p}%\\s+(\\S+)$`, 'm').exec(output);
    if (!match) throw new Error(`wrk printed no ${p}th percentile (is --latency set?)`);
    return milliseconds(match[1]);
  };
  const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(output);
  return {
    requests: Number(totals[1]),
    seconds,
    p50: percentile(50),
    p99: percentile(99),
    socketErrors: errors ? errors.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0,
    non2xx: non2xx ? Number(non2xx[1]) : 0,
  };
}

/**
 * Loads `url` with wrk (one thread, `connections` keep-alive connections, `duration` seconds; on the load
 * CPU when `pin`) and returns the rate, wrk's latency percentiles (ms) and, given the server's pid, its
 * CPU time per request: the same figures as summarize() makes of an autocannon run.
 */
export async function runWrk(label, { url, headers = {}, connections, duration }, serverPid, pin) {
  step(`${label}: wrk, ${connections} connection${connections === 1 ? '' : 's'}, ${duration} s`);
  const args = ['-t1', `-c${connections}`, `-d${duration}s`, '--timeout', '10s', '--latency'];
  for (const [name, value] of Object.entries(headers)) args.push('-H', `${name}: ${value}`);
  args.push(url);
  const cpuBefore = serverPid ? cpuSeconds(serverPid) : null;
  const figures = parseWrk(await wrkOutput(args, pin));
  const cpuAfter = serverPid ? cpuSeconds(serverPid) : null;
  const problems = [];
  if (figures.non2xx > 0) problems.push(`${figures.non2xx} answers outside 2xx/3xx`);
  if (figures.socketErrors > 0) problems.push(`${figures.socketErrors} socket errors`);
  if (figures.requests === 0) problems.push('no answers at all');
  if (problems.length > 0) fail(`${label}: ${problems.join(', ')}`);
  const cpu = cpuBefore !== null && cpuAfter !== null ? cpuAfter - cpuBefore : null;
  return {
    rps: figures.requests / figures.seconds,
    requests: figures.requests,
    p50: figures.p50,
    p99: figures.p99,
    ...serverCpu(cpu, figures.seconds, figures.requests),
  };
}

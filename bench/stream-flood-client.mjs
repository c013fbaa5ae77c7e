/**
 * The flooding tenant of bench/stream-flood.mjs, in a process of its own so its CPU does not slow the
 * measuring one: `sockets` metric streams to one instance, each sending `{"type":"subscribe"}` as fast
 * as its socket takes them (at most 1 MiB unsent, topped up every millisecond), reconnecting `reconnectMs` after a close, until
 * `durationS` has passed. Reports what it sent, what the server answered and the close codes it got.
 *
 * Started by fork() with one message: { port, key, instanceId, sockets, durationS, reconnectMs }.
 */
import WebSocket from 'ws';

const HIGH_WATER = 1024 * 1024;

process.once('message', ({ port, key, instanceId, sockets, durationS, reconnectMs }) => {
  const url = `wss://127.0.0.1:${port}/v1/instances/${instanceId}/metrics/stream`;
  const deadline = Date.now() + durationS * 1000;
  const totals = { sent: 0, subscribed: 0, connections: 0, closes: {} };
  const texts = [1, 2, 3, 4, 5].map((interval) => JSON.stringify({ type: 'subscribe', interval }));
  const open = new Set();

  function connect() {
    if (Date.now() >= deadline) {
      if (open.size === 0) finish();
      return;
    }
    totals.connections += 1;
    const socket = new WebSocket(url, {
      rejectUnauthorized: false,
      headers: { authorization: `Bearer ${key}` },
    });
    open.add(socket);
    let i = 0;
    const pump = () => {
      if (socket.readyState !== WebSocket.OPEN) return;
      if (Date.now() >= deadline) return socket.close();
      while (socket.bufferedAmount < HIGH_WATER) {
        socket.send(texts[i++ % texts.length]);
        totals.sent += 1;
      }
      // Waits for the buffer to drain rather than spinning: this process shares the machine's CPUs.
      setTimeout(pump, 1);
    };
    socket.on('message', (data) => {
      if (data.toString().startsWith('{"type":"subscribed"')) totals.subscribed += 1;
    });
    socket.on('open', pump);
    socket.on('error', () => {
      // a refused or reset connection also closes; the close code is counted there
    });
    socket.on('close', (code) => {
      open.delete(socket);
      totals.closes[code] = (totals.closes[code] ?? 0) + 1;
      if (Date.now() < deadline) setTimeout(connect, reconnectMs);
      else if (open.size === 0) finish();
    });
  }

  let finished = false;
  function finish() {
    if (finished) return;
    finished = true;
    process.send?.(totals, () => process.exit(0));
  }

  for (let s = 0; s < sockets; s++) connect();
  // Sockets the server never closes are closed by pump() at the deadline; this ends a hung one.
  setTimeout(
    () => {
      for (const socket of open) socket.terminate();
      finish();
    },
    (durationS + 10) * 1000,
  ).unref();
});

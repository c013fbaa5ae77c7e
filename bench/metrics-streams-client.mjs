/**
 * One client process of bench/metrics-streams.mjs (started by it with fork(); not run on its own).
 *
 * It holds its share of the streams: opens each over WSS with the `ws` package (key in the Authorization
 * header) and waits for `ready`; once every client has opened all of its streams (at the default
 * interval of 5 s, so that the streams already open cost the server less while the others open), it
 * subscribes each at the benchmark's interval and waits for `subscribed`. While
 * the parent says it measures, it records for every metrics message the lag from the sample's time (its
 * `timestamp`, a whole second) to the message's arrival here, in a histogram of whole milliseconds. The
 * server and the clients run on one machine, so they read the same clock.
 *
 * Messages from the parent: {type: 'open', port, streams: [{key, instanceId}], concurrency},
 * {type: 'subscribe', interval}, {type: 'measure'}, {type: 'stop'}. To the parent: {type: 'opened'},
 * {type: 'subscribed'}, {type: 'result', …}, and
 * {type: 'failed', message} when a stream could not be opened or closed while it should not have.
 */
import WebSocket from 'ws';

const HISTOGRAM_MS = 60_000;
const histogram = new Uint32Array(HISTOGRAM_MS + 1);
let measuring = false;
let stopping = false;
let received = 0;
let dropped = 0;
let maxLag = 0;
const sockets = [];
const TIMESTAMP = '"timestamp":"';

function send(message) {
  process.send?.(message);
}

function failed(message) {
  send({ type: 'failed', message });
}

/** Opens one stream and resolves once it is ready; `subscribe(socket)` then sets its interval. */
function openStream(port, { key, instanceId }) {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`wss://127.0.0.1:${port}/v1/instances/${instanceId}/metrics/stream`, {
      headers: { authorization: `Bearer ${key}` },
      rejectUnauthorized: false,
      perMessageDeflate: false,
    });
    socket.state = 'connecting';
    socket.on('message', (data) => {
      const text = data.toString();
      if (socket.state === 'subscribed') {
        if (!measuring) return;
        // The server writes type, instance_id, timestamp first: no need to parse the whole message.
        const at = text.indexOf(TIMESTAMP);
        if (at < 0) return;
        const sampled = Date.parse(text.slice(at + TIMESTAMP.length, at + TIMESTAMP.length + 24));
        const lag = Math.max(0, Date.now() - sampled);
        histogram[Math.min(HISTOGRAM_MS, Math.round(lag))] += 1;
        if (lag > maxLag) maxLag = lag;
        received += 1;
        if (text.includes('"dropped":')) dropped += JSON.parse(text).dropped;
        return;
      }
      const message = JSON.parse(text);
      if (message.type === 'ready') {
        socket.state = 'ready';
        resolve(socket);
      } else if (message.type === 'subscribed') {
        socket.state = 'subscribed';
        socket.onSubscribed?.();
      } else if (message.type === 'error') {
        reject(new Error(`stream of ${instanceId}: ${message.code} ${message.message}`));
      }
    });
    socket.on('close', (code, reason) => {
      if (socket.state === 'connecting')
        reject(new Error(`stream of ${instanceId} closed ${code} ${reason}`));
      else if (!stopping) failed(`stream of ${instanceId} closed ${code} ${reason}`);
    });
    socket.on('error', (error) => {
      if (socket.state === 'connecting') reject(error);
    });
  });
}

async function openAll({ port, streams, concurrency }) {
  let next = 0;
  async function worker() {
    while (next < streams.length) {
      const stream = streams[next++];
      sockets.push(await openStream(port, stream));
    }
  }
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } catch (error) {
    failed(error.message);
    return;
  }
  send({ type: 'opened', count: sockets.length });
}

async function subscribeAll({ interval }) {
  await Promise.all(
    sockets.map(
      (socket) =>
        new Promise((resolve) => {
          socket.onSubscribed = resolve;
          socket.send(JSON.stringify({ type: 'subscribe', interval }));
        }),
    ),
  );
  send({ type: 'subscribed' });
}

process.on('message', (message) => {
  if (message.type === 'open') void openAll(message);
  else if (message.type === 'subscribe') void subscribeAll(message);
  else if (message.type === 'measure') measuring = true;
  else if (message.type === 'stop') {
    measuring = false;
    stopping = true;
    // Only the buckets that hold something, as [lag ms, count] pairs.
    const buckets = [];
    for (let ms = 0; ms <= HISTOGRAM_MS; ms++) if (histogram[ms] > 0) buckets.push([ms, histogram[ms]]);
    send({ type: 'result', received, dropped, maxLag, buckets });
    for (const socket of sockets) socket.terminate();
    setTimeout(() => process.exit(0), 100);
  }
});

// The conformance suite's client sends no Authorization header, and
// portcullis answers 401 to every request without one. This proxy adds the
// bearer token and changes nothing else: method, path, every header
// (Host and Origin included, so the DNS-rebinding scenarios still reach
// portcullis's own checks) and the body, streamed both ways.
//
// usage: node bearer-proxy.mjs http://127.0.0.1:PORT TOKEN
// prints "listening PORT" on stdout once it accepts connections.
import http from "node:http";

const [target, token] = process.argv.slice(2);
const upstream = new URL(target);

const server = http.createServer((request, response) => {
  const headers = { ...request.headers, authorization: `Bearer ${token}` };
  const forwarded = http.request(
    {
      host: upstream.hostname,
      port: upstream.port,
      method: request.method,
      path: request.url,
      headers,
      setHost: false,
    },
    (answer) => {
      response.writeHead(answer.statusCode, answer.rawHeaders);
      answer.pipe(response);
    },
  );
  forwarded.on("error", () => {
    if (!response.headersSent) {
      response.writeHead(502);
    }
    response.end();
  });
  // A client that goes away cancels the request upstream, as closing the
  // stream is how Streamable HTTP cancels.
  response.on("close", () => forwarded.destroy());
  request.pipe(forwarded);
});

server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});

// Where a session script connects, from its environment: over Streamable
// HTTP with the token as a bearer header when PORTCULLIS_URL is set, else
// over stdio to the `serve` command PORTCULLIS_SERVE names (a JSON array).
// Takes the SDK's transport classes, so the v1 and v2 scripts share it.
export function connection(StdioClientTransport, StreamableHTTPClientTransport) {
  if (process.env.PORTCULLIS_URL) {
    return new StreamableHTTPClientTransport(new URL(process.env.PORTCULLIS_URL), {
      requestInit: { headers: { Authorization: `Bearer ${process.env.PORTCULLIS_TOKEN}` } },
    });
  }
  const [command, ...args] = JSON.parse(process.env.PORTCULLIS_SERVE);
  return new StdioClientTransport({
    command,
    args,
    env: { PORTCULLIS_TOKEN: process.env.PORTCULLIS_TOKEN, PORTCULLIS_LOG: "warn", PATH: process.env.PATH },
    stderr: "ignore",
  });
}

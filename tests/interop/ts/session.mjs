// One session of the official TypeScript SDK client against `portcullis
// serve`: every call goes through the SDK's own `callTool`, which checks
// each result against the tool's output schema. Prints one JSON report on
// stdout; the Rust test (tests/interop_ts.rs) judges it. Over stdio (the
// SDK spawns PORTCULLIS_SERVE) or, when PORTCULLIS_URL is set, over
// Streamable HTTP with the token as a bearer header.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { connection } from "./connection.mjs";

const transport = connection(StdioClientTransport, StreamableHTTPClientTransport);
const client = new Client(
  { name: "ts-sdk-interop", version: "1.0.0" },
  { capabilities: { elicitation: {} } },
);

// The answer the user gives to the next approval question.
let answer = { action: "decline" };
const questions = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  questions.push(request.params.message);
  return answer;
});

const report = { steps: {} };

// Runs one call; records how it ended, as the SDK delivered it.
async function step(name, tool, toolArgs, options = {}) {
  try {
    const result = await client.callTool({ name: tool, arguments: toolArgs }, undefined, options);
    const structured = result.structuredContent ?? {};
    report.steps[name] = {
      isError: result.isError === true,
      reason_code: structured.reason_code ?? null,
      failure: structured.failure ?? null,
      decision: structured.decision ?? null,
      structured,
      text: (result.content ?? []).map((c) => c.text ?? "").join(""),
    };
  } catch (error) {
    report.steps[name] = { thrown: true, code: error.code ?? null, message: String(error.message ?? error) };
  }
}

await client.connect(transport);
report.tools = (await client.listTools()).tools.map((t) => t.name).sort();

await step("allowed", "read_file", { path: "README.md" });
answer = { action: "accept", content: { approve: true } };
await step("asked_accept", "write_file", { path: "approved.txt", content: "yes\n" });
answer = { action: "decline" };
await step("asked_decline", "write_file", { path: "declined.txt", content: "no\n" });
answer = { action: "cancel" };
await step("asked_cancel", "write_file", { path: "cancelled.txt", content: "no\n" });
answer = { action: "accept", content: { approve: false } };
await step("asked_not_approved", "write_file", { path: "unticked.txt", content: "no\n" });
await step("denied", "write_file", { path: "outside/escape.txt", content: "x" });
await step("unknown", "no_such_tool", {});
await step("failed", "read_file", { path: "missing.txt" });
await step("gate", "gate", { command: "ls -la | grep x" });
await step("wrapped", "tool_call", { name: "read_file", arguments: { path: "README.md" } });
await step("wrapped_denied", "tool_call", {
  name: "write_file",
  arguments: { path: "outside/escape.txt", content: "x" },
});

const progress = [];
await step("progress", "search", { pattern: "needle" }, {
  onprogress: (p) => progress.push(p.progress),
});
report.progress = progress;

// Cancel a search once it reports progress; the session goes on.
const abort = new AbortController();
const cancelled = client
  .callTool({ name: "search", arguments: { pattern: "needle", path: "deep" } }, undefined, {
    signal: abort.signal,
    onprogress: () => abort.abort("enough"),
  })
  .then(() => "finished", (error) => `rejected: ${error.name ?? ""} ${error.message ?? error}`);
report.cancelled = await cancelled;
await step("after_cancel", "read_file", { path: "README.md" });

report.questions = questions;
if (transport.terminateSession) {
  await transport.terminateSession();
}
await client.close();
process.stdout.write(JSON.stringify(report));

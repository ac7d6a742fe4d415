// Calls portcullis relays to a downstream server (servers/downstream.py)
// and bridges to an agent (servers/fake_codex.py), through the TypeScript
// SDK's v2 client (`@modelcontextprotocol/client`),
// which checks each result against the tool's output schema and, in the
// 2026-07-28 era, its `resultType`. ERA=modern probes with server/discover
// (mode auto); ERA=legacy runs `initialize`. Prints one JSON report; the
// Rust test (tests/interop_ts.rs) judges it. Over stdio (the SDK spawns
// PORTCULLIS_SERVE) or, with PORTCULLIS_URL, over Streamable HTTP.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { connection } from "./connection.mjs";

const mode = process.env.ERA === "modern" ? "auto" : "legacy";
const client = new Client(
  { name: "ts-v2-interop", version: "1.0.0" },
  { capabilities: { elicitation: {} }, versionNegotiation: { mode } },
);
const questions = [];
client.setRequestHandler("elicitation/create", async (request) => {
  questions.push(request.params.message);
  return { action: "accept", content: { approve: true } };
});

const report = { steps: {} };

async function step(name, tool, toolArgs, options = {}) {
  try {
    const result = await client.callTool({ name: tool, arguments: toolArgs }, options);
    const structured = result.structuredContent ?? {};
    report.steps[name] = {
      isError: result.isError === true,
      reason_code: structured.reason_code ?? null,
      failure: structured.failure ?? null,
      structured,
      text: (result.content ?? []).map((c) => c.text ?? "").join("\n"),
    };
  } catch (error) {
    report.steps[name] = { thrown: true, code: error.code ?? null, message: String(error.message ?? error) };
  }
}

await client.connect(connection(StdioClientTransport, StreamableHTTPClientTransport));
report.version = client.getNegotiatedProtocolVersion() ?? null;
report.tools = (await client.listTools()).tools.map((t) => t.name).sort();

await step("text", "down__describe", {});
await step("shaped", "down__shaped", {});
await step("wrapped", "tool_call", { name: "down__shaped", arguments: {} });
await step("unshaped", "down__unshaped", {});
await step("denied", "down__note", { path: "../outside.txt", content: "x" });
await step("asked", "down__note", { path: "notes/a.txt", content: "hello" });
await step("downstream_error", "down__fail", {});
const progress = [];
await step("progress", "down__slow", { steps: 3, delay: 0.01 }, {
  onprogress: (p) => progress.push(p.progress),
});
report.progress = progress;

// Cancel a slow call once it reports progress; the session goes on.
const abort = new AbortController();
report.cancelled = await client
  .callTool({ name: "down__slow", arguments: { steps: 1000, delay: 0.05 } }, {
    signal: abort.signal,
    onprogress: () => abort.abort("enough"),
  })
  .then(() => "finished", (error) => `rejected: ${error.name ?? ""} ${error.message ?? error}`);
await step("after_cancel", "down__describe", {});

// The bridge: a conversation with the agent (servers/fake_codex.py).
await step("prompt", "prompt_send", { prompt: "hello" });
const session = report.steps.prompt.structured?.session_id;
await step("prompt_again", "prompt_send", { prompt: "and again", session_id: session });
await step("sessions", "sessions_list", {});
await step("session", "session_get", { session_id: session });
await step("agent_error", "prompt_send", { prompt: "fail now" });
const bridged = [];
await step("prompt_progress", "prompt_send", { prompt: "progress please" }, {
  onprogress: (p) => bridged.push(p.message ?? ""),
});
report.bridged_progress = bridged;
await step("prompt_cancel", "prompt_cancel", { session_id: session });

report.questions = questions;
await client.close();
process.stdout.write(JSON.stringify(report));

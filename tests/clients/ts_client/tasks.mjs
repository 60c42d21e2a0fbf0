// Drives one background task through the official TypeScript MCP client
// (@modelcontextprotocol/client) and its tasks extension (@modelcontextprotocol/ext-tasks),
// against a 2026-07-28 server. Run by tests/clients/test_tasks_ts_client.py:
//
//   node tasks.mjs <mcp url> <scenario> [<arguments as JSON>]
//
// Scenarios: "complete" (a task polled to completion), "question" (a task that asks, the
// client answers through onInputRequest), "cancel" (cancel a running task). The last line
// printed is one JSON document describing what the client saw.
import { readFileSync, existsSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const [url, scenario, rawArgument = "{}"] = process.argv.slice(2);
const argument = JSON.parse(rawArgument);
const VERSION = "2026-07-28";
const TASKS = "io.modelcontextprotocol/tasks";
const clientInfo = { name: "ts-tasks-interop", version: "1.0.0" };
const clientCapabilities = { elicitation: { form: {} }, extensions: { [TASKS]: {} } };
// The tests' signed-in mode (anonymous access off) hands every client a bearer token.
const token = process.env.MCP_TASKS_TEST_TOKEN;
const signedIn = token ? { authorization: `Bearer ${token}` } : {};

// The SDK Client cannot put tasks-extension traffic on the wire itself: ext-tasks asks the
// host for a raw request path (rawDispatch). This one POSTs the framed request as a
// Streamable HTTP client does, with the standard headers.
let nextId = 0;
async function rawDispatch(request, options = {}) {
  const body = { jsonrpc: "2.0", id: `raw-${++nextId}`, ...request };
  const params = body.params ?? {};
  const name = body.method === "tools/call" ? params.name : params.taskId;
  const headers = new Headers({
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": VERSION,
    "mcp-method": body.method,
    ...(typeof name === "string" ? { "mcp-name": name } : {}),
    ...signedIn,
  });
  for (const [key, value] of Object.entries(options.context?.headers ?? {})) {
    headers.set(key, value); // the extension's own headers (it sets Mcp-Name too) win
  }
  const response = await fetch(url, {
    method: "POST",
    headers,
    body: JSON.stringify(body),
    signal: options.signal,
  });
  const text = await response.text();
  const message = (response.headers.get("content-type") ?? "").startsWith("text/event-stream")
    ? text
        .split(/\r?\n\r?\n/)
        .map((block) =>
          block
            .split(/\r?\n/)
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).trim())
            .join(""),
        )
        .filter((data) => data)
        .map((data) => JSON.parse(data))
        .at(-1)
    : JSON.parse(text);
  return "error" in message
    ? { kind: "error", error: message.error }
    : { kind: "result", result: message.result };
}

function onInputRequest(request) {
  if (request.kind !== "elicitation") throw new Error(`unexpected ${request.kind} request`);
  return { action: "accept", content: argument.answer ?? {} };
}

async function waitForFile(path, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(path)) {
    if (Date.now() > deadline) throw new Error(`${path} never appeared`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return readFileSync(path, "utf8");
}

const client = new Client(clientInfo, {
  capabilities: clientCapabilities,
  versionNegotiation: { mode: { pin: VERSION } },
});
await client.connect(
  new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: signedIn } }),
);
const session = createTaskSessionFromClient(client, {
  endpointId: "mcp-tasks-interop",
  rawDispatch,
  v2RequestFraming: { protocolVersion: VERSION, clientInfo, clientCapabilities },
  onInputRequest,
});
const report = { era: client.getProtocolEra(), events: [] };
try {
  const execution = await session.callTool(argument.tool, argument.arguments ?? {}, {
    task: { preference: "require" },
  });
  report.kind = execution.kind;
  report.taskId = execution.handle?.taskId;
  if (scenario === "cancel") {
    await waitForFile(`${argument.arguments.marker_dir}/started`);
    await execution.cancel();
  }
  const { outcome } = await execution.settle({
    onEvent: (event) => report.events.push(event.type === "task" ? event.task.status : "outcome"),
  });
  report.status = outcome.status;
  if (outcome.status === "completed") report.result = outcome.result;
  if (outcome.status === "failed") report.error = String(outcome.error?.message ?? outcome.error);
} catch (error) {
  report.exception = `${error?.name}: ${error?.message}`;
  report.detail = String(error?.cause?.message ?? error?.issues ?? "");
} finally {
  await session.close();
  await client.close();
}
console.log(JSON.stringify(report));

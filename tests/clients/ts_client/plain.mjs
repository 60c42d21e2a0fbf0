// A client without the tasks extension: the official TypeScript MCP client
// (@modelcontextprotocol/client) alone, as hosts use it, with a request timeout shorter than
// the tools it calls. Run by tests/handles/test_handles_ts_client.py:
//
//   node plain.mjs <mcp url> <scenario> [<options as JSON>]
//
// It calls options.tool, then follows each handle the way a model would: the call the handle
// names ("check_task"), "answer_task" with options.answer for a question, and in scenario
// "cancel" "cancel_task" at the first handle. In scenario "approval" it writes the task id to
// <options.markers>/waiting at the first handle that waits for staff, and waits for
// <options.markers>/approved before it checks again. Options: era ("modern" or "legacy"),
// timeoutMs (the client's request timeout), elicit (an answer the client gives inline when
// asked; without it, the client declares no elicitation). The last line printed is one JSON
// document describing what the client saw.
import { existsSync, writeFileSync } from "node:fs";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, scenario, raw = "{}"] = process.argv.slice(2);
const options = JSON.parse(raw);
const token = process.env.MCP_TASKS_TEST_TOKEN;
const headers = token ? { authorization: `Bearer ${token}` } : {};
const capabilities = options.elicit ? { elicitation: { form: {} } } : {};

const client = new Client(
  { name: "ts-plain", version: "1.0.0" },
  {
    capabilities,
    ...(options.era === "legacy" ? {} : { versionNegotiation: { mode: { pin: "2026-07-28" } } }),
  },
);
const report = { calls: [], asked: [] };
if (options.elicit) {
  client.setRequestHandler("elicitation/create", async (request) => {
    report.asked.push(request.params.message);
    return { action: "accept", content: options.elicit };
  });
}

async function call(name, args) {
  const started = Date.now();
  const result = await client.callTool(
    { name, arguments: args },
    { timeout: options.timeoutMs ?? 3000 },
  );
  report.calls.push({
    name,
    ms: Date.now() - started,
    text: (result.content ?? []).map((part) => part.text ?? "").join("\n"),
    structured: result.structuredContent ?? null,
    isError: result.isError ?? false,
  });
  return result;
}

const isHandle = (result) =>
  !result.isError && result.structuredContent?.taskId && result.structuredContent?.next;

async function waitForFile(path, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(path)) {
    if (Date.now() > deadline) throw new Error(`${path} never appeared`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  report.era = client.getProtocolEra();
  report.tools = (await client.listTools()).tools.map((tool) => tool.name);
  let result = await call(options.tool, options.arguments ?? {});
  for (let step = 0; step < 40 && isHandle(result); step++) {
    const handle = result.structuredContent;
    if (scenario === "cancel") {
      await call("cancel_task", { task_id: handle.taskId });
      result = await call("check_task", { task_id: handle.taskId });
      break;
    }
    if (handle.waitingFor === "answer") {
      result = await call("answer_task", { task_id: handle.taskId, answer: options.answer });
      continue;
    }
    if (handle.waitingFor === "staff" && scenario === "approval") {
      writeFileSync(`${options.markers}/waiting`, handle.taskId);
      await waitForFile(`${options.markers}/approved`);
    }
    result = await call(handle.next.tool, handle.next.arguments);
  }
  report.final = report.calls.at(-1);
} catch (error) {
  report.exception = `${error?.name}: ${error?.message}`;
} finally {
  await client.close();
}
console.log(JSON.stringify(report));

// An editor-like ACP client on the official TypeScript SDK (@agentclientprotocol/sdk).
// Usage: node client.mjs PROJECT_DIR -- AGENT_COMMAND [ARGS...]
// It spawns the agent, runs initialize, session/new, one prompt whose tool call it allows,
// and a second prompt it cancels while asked; it prints one JSON summary line on stdout.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, ndJsonStream, methods, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const [project, separator, command, ...args] = process.argv.slice(2);
if (separator !== "--" || !command) {
  console.error("usage: node client.mjs PROJECT_DIR -- AGENT_COMMAND [ARGS...]");
  process.exit(2);
}
const agent = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));

const updates = [];
const permissions = [];
let answer = "allow";
let onAsk = null;

const app = client({ name: "harness-ts-test-client" })
  .onRequest(methods.client.session.requestPermission, async ({ params }) => {
    permissions.push(params.options.map((option) => option.kind).sort());
    if (onAsk) await onAsk(params.sessionId);
    if (answer === "cancelled") return { outcome: { outcome: "cancelled" } };
    const allow = params.options.find((option) => option.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onNotification(methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  });

const summary = await app.connectWith(stream, async (ctx) => {
  const hello = await ctx.request(methods.agent.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: {},
  });
  const { sessionId } = await ctx.request(methods.agent.session.new, { cwd: project, mcpServers: [] });
  const first = await ctx.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "Read the note." }],
  });
  const firstUpdates = updates.splice(0);
  answer = "cancelled";
  onAsk = (id) => ctx.notify(methods.agent.session.cancel, { sessionId: id });
  const second = await ctx.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: "Read it again." }],
  });
  return {
    protocolVersion: hello.protocolVersion,
    loadSession: hello.agentCapabilities?.loadSession ?? false,
    stopReasons: [first.stopReason, second.stopReason],
    permissions,
    firstKinds: firstUpdates.map((update) => update.sessionUpdate),
    toolCall: firstUpdates.find((update) => update.sessionUpdate === "tool_call"),
    toolResult: firstUpdates.find((update) => update.sessionUpdate === "tool_call_update"),
    text: firstUpdates
      .filter((update) => update.sessionUpdate === "agent_message_chunk")
      .map((update) => update.content.text)
      .join(""),
  };
});
agent.stdin.end();
const code = await new Promise((resolve) => agent.on("exit", resolve));
console.log(JSON.stringify({ ...summary, agentExitCode: code }));

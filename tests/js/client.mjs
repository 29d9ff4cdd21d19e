// The TypeScript MCP SDK as a client of `vaultsync serve`, for tests/server/test_compat_matrix.py.
// Usage: node client.mjs SPEC_JSON  (token in $VAULTSYNC_TEST_TOKEN) -> prints a JSON list, one row per transport.
// SPEC: {"packages": {label: npm name}, "stdio": {command, args}, "http": url, "script": [{step, tool, arguments}]}
import { readFileSync } from "node:fs";

const spec = JSON.parse(process.argv[2]);
const rows = [];

async function runOne(sdk, transportName, makeTransport) {
  const { Client } = await import(`${sdk}/client/index.js`);
  const transport = await makeTransport();
  let protocol = null; // the client keeps the negotiated version private: catch it on its way to the transport
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => { protocol = v; setVersion?.(v); };
  const client = new Client({ name: "vaultsync-matrix", version: "1.0.0" });
  const calls = {};
  let tools;
  try {
    await client.connect(transport);
    tools = await client.listTools();
    for (const { step, tool, arguments: args } of spec.script) {
      const r = await client.callTool({ name: tool, arguments: args });
      calls[step] = { isError: r.isError ?? false, structured: r.structuredContent ?? null,
                      text: r.content?.[0]?.text ?? null };
    }
  } finally {
    await client.close().catch(() => {}); // also stops the stdio server
  }
  return {
    protocol, transport: transportName, server: client.getServerVersion()?.name ?? null,
    tools: tools.tools.map((t) => ({ name: t.name, readOnly: t.annotations?.readOnlyHint ?? null })),
    calls,
  };
}

for (const [label, sdk] of Object.entries(spec.packages)) {
  const { version } = JSON.parse(readFileSync(new URL(`./node_modules/${sdk}/package.json`, import.meta.url)));
  const head = { client: label, version };
  const stdio = async () => {
    const { StdioClientTransport } = await import(`${sdk}/client/stdio.js`);
    return new StdioClientTransport({ ...spec.stdio, stderr: "inherit" });
  };
  const http = async () => {
    const { StreamableHTTPClientTransport } = await import(`${sdk}/client/streamableHttp.js`);
    const headers = { Authorization: `Bearer ${process.env.VAULTSYNC_TEST_TOKEN}` };
    return new StreamableHTTPClientTransport(new URL(spec.http), { requestInit: { headers } });
  };
  for (const [name, make] of [["stdio", stdio], ["streamable HTTP", http]]) {
    try {
      rows.push({ ...head, ...(await runOne(sdk, name, make)) });
    } catch (e) {
      rows.push({ ...head, transport: name, error: String(e?.stack ?? e) });
    }
  }
}
console.log(JSON.stringify(rows));

// A second, independent MCP client: the official TypeScript SDK talks to `vaultsync serve` over stdio.
// Usage: node client.mjs PYTHON DB VAULT  -> prints one JSON object with what the server answered.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [python, db, vault] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: python,
  args: ["-m", "vaultsync", "--db", db, "serve", vault],
  stderr: "inherit",
});
const client = new Client({ name: "vaultsync-js-test", version: "1.0.0" });
await client.connect(transport);

const tools = await client.listTools();
const search = await client.callTool({ name: "search_notes", arguments: { query: "plumber", limit: 3 } });
const read = await client.callTool({ name: "read_note", arguments: { path: "Projects/Atlas.md", as_of: "2024-01-15" } });
const missing = await client.callTool({ name: "read_note", arguments: { path: "Nope.md" } });

console.log(JSON.stringify({
  protocolVersion: transport.protocolVersion ?? null,
  server: client.getServerVersion(),
  tools: tools.tools.map((t) => ({ name: t.name, readOnly: t.annotations?.readOnlyHint ?? null })),
  search: { isError: search.isError ?? false, structured: search.structuredContent ?? null, text: search.content?.[0]?.text },
  read: { isError: read.isError ?? false, structured: read.structuredContent ?? null },
  missing: { isError: missing.isError ?? false, text: missing.content?.[0]?.text },
}));
await client.close();

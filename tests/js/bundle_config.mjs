// The launch command a host derives from an MCP Bundle's manifest and the user's settings, computed by the
// official library (@anthropic-ai/mcpb getMcpConfigForManifest: ${__dirname} and ${user_config.*} substitution).
// Usage: node bundle_config.mjs UNPACKED_DIR '{"vault": "...", "allow_writes": false}'
import { readFileSync } from "node:fs";
import path from "node:path";
import { getMcpConfigForManifest } from "@anthropic-ai/mcpb";

const [dir, userConfig] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(path.join(dir, "manifest.json"), "utf8"));
const config = await getMcpConfigForManifest({
  manifest,
  extensionPath: dir,
  systemDirs: {},
  userConfig: JSON.parse(userConfig),
  pathSeparator: path.sep,
});
console.log(JSON.stringify(config ?? null));

#!/usr/bin/env bash
# Build the extension as editors/vscode/statewright.vsix with @vscode/vsce from the npm registry.
# node_modules is kept beside the extension (gitignored), so only the first build downloads anything.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules/@vscode/vsce ] || [ ! -d node_modules/vscode-languageclient ]; then
    npm install --no-audit --no-fund --loglevel=error
fi
npx --no-install vsce package --allow-missing-repository --skip-license --out statewright.vsix
echo "built $(pwd)/statewright.vsix"

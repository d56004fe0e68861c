"""The language server: `statewright lsp`, the compiler's front door as an editor sees it, over stdio.

    positions.py  character offsets <-> LSP positions (UTF-8, UTF-16 or UTF-32 code units)
    index.py      where each state, agent, type, tool, input and field is declared and used
    context.py    what the text just before the cursor is, for completion (works on broken text)
    features.py   diagnostics, hover, definition, references, completion, rename, formatting, outline,
                  folding and code actions, as LSP types
    running.py    code lenses that run test blocks and write the runner; a runner's line back to the spec
    server.py     the pygls server: documents, compiles off the event loop, the latest text wins

Nothing here is imported unless `statewright lsp` runs (pygls and lsprotocol are the `lsp` extra).
"""

// `dsrt serve <model> --tokenizer byte|gpt2 [...]`: an HTTP server answering OpenAI-shaped
// POST /v1/completions from a dsrt checkpoint folder or an llm.c .bin, with continuous batching
// (runtime/serve). One rank only; see docs/inference.md.
#pragma once

namespace ds::runtime {

int serveCommand(int argc, char** argv);

}  // namespace ds::runtime

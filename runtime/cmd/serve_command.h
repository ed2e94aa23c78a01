// `dsrt serve <model> --tokenizer byte|gpt2 [...]`: an HTTP server answering OpenAI-shaped
// POST /v1/completions from a dsrt checkpoint folder or an llm.c .bin, with continuous batching
// (runtime/serve). On several ranks (dsrun) tensor-parallel: rank 0 serves, the others follow its
// decode steps (runtime/serve/decode_link.h); see docs/inference.md.
#pragma once

namespace ds::runtime {

int serveCommand(int argc, char** argv);

}  // namespace ds::runtime

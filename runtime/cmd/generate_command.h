// `dsrt generate <model> --prompt_ids 1,2,3 [...]`: continuations of token-id (or byte-level text)
// prompts from a dsrt checkpoint folder or an llm.c .bin, with a KV cache (runtime/inference).
#pragma once

namespace ds::runtime {

int generateCommand(int argc, char** argv);

}  // namespace ds::runtime

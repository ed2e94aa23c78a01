// Names and manifest schema of a checkpoint directory (shared by save, load and export). Not I/O.
//   <root>/latest                       tag text (replaced atomically)
//   <root>/<tag>/manifest.json          written last, by rank 0
//   <root>/<tag>/model.safetensors      full fp32 params, one tensor per parameter (rank 0)
//   <root>/<tag>/optim_rank_NNNNN.safetensors  tensors "<state>@<flat offset>", shape [size]
//   <root>/<tag>/optim_rank_NNNNN.json  that rank's file entry (bytes, crc32c, ranges)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ds::runtime::ckpt {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kFormat = "dsrun-checkpoint";
constexpr int kFormatVersion = 1;

std::string optimFileName(int rank);      // optim_rank_00003.safetensors
std::string rankEntryFileName(int rank);  // optim_rank_00003.json
std::string rangeTensorName(const std::string& state, size_t offset);  // exp_avg@1024
// Splits "exp_avg@1024"; false when the name is not of that form.
bool parseRangeTensorName(const std::string& name, std::string* state, size_t* offset);
// Throws ConfigError unless tag is a plain directory name (no '/', not '.'/'..', no spaces).
void checkTag(const std::string& tag);
// A file's CRC-32C as the manifest writes it: 8 lowercase hex digits ("e3069283").
std::string crcHex(uint32_t crc);

}  // namespace ds::runtime::ckpt

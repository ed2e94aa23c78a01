// makeModel over an op interface: the device-agnostic models (OpsGpt2Model, OpsMlpModel) with
// every buffer in `ops`' memory. Not a replacement for makeModel(cfg) (the host models stay the
// CPU engine's path, bf16 included). Invariant: the same validation and errors as makeModel(cfg).
#pragma once

#include <memory>

#include "runtime/model/model.h"
#include "runtime/tensor/ops.h"

namespace ds::runtime {

// Throws ConfigError as makeModel(cfg) does; `ops` must outlive the model.
std::unique_ptr<Model> makeModel(const ModelConfig& cfg, Ops& ops);

}  // namespace ds::runtime

#pragma once
// What `gpuscout bench --only train-step` measures, as the CLI validated it (before any GPU is
// touched). Pure C++17: included by the CUDA backend's benchmark.hpp.
#include <string>
#include <vector>

#include "gpuscout/infer/transformer_config.hpp"

namespace gpuscout::bench {

// The catalog model `train-step` uses without --model.
inline constexpr const char* kDefaultTrainModel = "llama-3.1-8b";
inline constexpr int kDefaultTrainLayers = 4;

struct TrainStepOptions {
  infer::TransformerConfig model;     // resolved from the catalog (kDefaultTrainModel without --model)
  std::string model_slug;             // lower-case catalog name, part of every record key
  int layers = kDefaultTrainLayers;   // --train-layers: decoder layers run forward and backward
  std::vector<int> micro_batches{1};  // --micro-batch: sequences per step, one case each
  std::vector<int> seqs{4096};        // --seq: tokens per sequence, one case each
  bool fp8 = false;                   // --train-precision fp8: the linear layers' GEMMs in FP8
};

}  // namespace gpuscout::bench

// The safetensors files of a Hugging Face checkpoint directory: model.safetensors, or the
// shards named by model.safetensors.index.json ({"weight_map": {tensor: shard file}}).
// Every tensor the index names must be in its shard; a missing shard is named.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/checkpoint/safetensors.h"

namespace onecat::models {

class CheckpointFiles {
 public:
  explicit CheckpointFiles(const std::string& directory);  // InputError naming what is wrong

  const Tensor* find(std::string_view name) const;  // nullptr if no file holds it
  // InputError "<dir>: tensor <name> is missing …" if absent.
  const Tensor& require(std::string_view name) const;
  size_t total_bytes() const;  // of all files, for throughput figures
  const std::string& directory() const { return directory_; }

 private:
  std::string directory_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
};

}  // namespace onecat::models

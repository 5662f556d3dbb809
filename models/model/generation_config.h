// What ends generation for a checkpoint without (or beside) its tokenizer: the stop ids of
// generation_config.json's eos_token_id, else config.json's (an id or a list of ids).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace onecat::model {

// Empty when neither file names one. InputError (naming the file and field) for a malformed
// value.
std::vector<int32_t> eos_token_ids(const std::string& checkpoint_directory);

}  // namespace onecat::model

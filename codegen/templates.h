// The device templates embedded into the binary at build time (cmake/embed_templates.cmake).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace onecat {

struct EmbeddedTemplate {
  std::string_view name;  // path under templates/, e.g. "common/fp16.cuh"
  std::string_view text;
};

const std::vector<EmbeddedTemplate>& embedded_templates();

// The templates a source includes, directly or through other templates (#include "name"),
// in a deterministic order. Throws Error naming a missing one.
std::vector<EmbeddedTemplate> templates_included_by(std::string_view source);

}  // namespace onecat

#include "models/chat/ordered_json.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace onecat::chat {
namespace {

using Ordered = nlohmann::ordered_json;
// ordered_json's object is a vector of pairs; appending to it directly skips the linear lookup
// of ordered_map::emplace.
using Pairs = Ordered::object_t::Container;

// Objects of more keys than this look keys up in a hash index instead of scanning.
constexpr size_t kScanKeys = 16;

// An object being filled: its keys' places, indexed once it outgrows a scan.
class ObjectFill {
 public:
  explicit ObjectFill(Ordered& node) : node_(&node) {}

  Ordered& slot(std::string key) {
    Pairs& pairs = node_->get_ref<Ordered::object_t&>();
    if (index_.empty() && pairs.size() < kScanKeys) {
      for (auto& [k, v] : pairs) {
        if (k == key) return v;
      }
    } else {
      if (index_.empty()) {
        for (size_t i = 0; i < pairs.size(); ++i) index_.emplace(pairs[i].first, i);
      }
      if (auto it = index_.find(key); it != index_.end()) return pairs[it->second].second;
      index_.emplace(key, pairs.size());
    }
    pairs.emplace_back(std::move(key), Ordered());
    return pairs.back().second;
  }

 private:
  Ordered* node_;
  std::unordered_map<std::string, size_t> index_;
};

// nlohmann's SAX interface, building the document. A container's parent gains no element while
// the container is open, so pointers to open containers stay valid.
class Builder {
 public:
  Ordered take() { return std::move(root_); }

  bool null() { return put(Ordered()); }
  bool boolean(bool v) { return put(Ordered(v)); }
  bool number_integer(Ordered::number_integer_t v) { return put(Ordered(v)); }
  bool number_unsigned(Ordered::number_unsigned_t v) { return put(Ordered(v)); }
  bool number_float(Ordered::number_float_t v, const std::string&) { return put(Ordered(v)); }
  bool string(Ordered::string_t& v) { return put(Ordered(std::move(v))); }
  bool binary(Ordered::binary_t& v) { return put(Ordered::binary(std::move(v))); }

  bool start_object(size_t) { return open(Ordered::object(), true); }
  bool key(Ordered::string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(size_t) { return open(Ordered::array(), false); }
  bool end_array() { return close(); }

  template <class Exception>
  bool parse_error(size_t, const std::string&, const Exception& e) {
    throw e;
  }

 private:
  struct Open {
    Ordered* node;
    std::optional<ObjectFill> object;  // set when node is an object
  };

  Ordered& place(Ordered&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return root_;
    }
    Open& top = stack_.back();
    if (top.object) return top.object->slot(std::move(key_)) = std::move(v);
    Ordered::array_t& items = top.node->get_ref<Ordered::array_t&>();
    items.push_back(std::move(v));
    return items.back();
  }

  bool put(Ordered&& v) {
    place(std::move(v));
    return true;
  }

  bool open(Ordered&& empty, bool object) {
    Ordered& node = place(std::move(empty));
    stack_.push_back({&node, std::nullopt});
    if (object) stack_.back().object.emplace(node);
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  Ordered root_;
  std::vector<Open> stack_;
  std::string key_;
};

}  // namespace

Ordered parse_ordered_json(std::string_view text) {
  Builder builder;
  Ordered::sax_parse(text.begin(), text.end(), &builder);
  return builder.take();
}

bool json_nests_deeper(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

Ordered to_ordered_json(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      Ordered out = Ordered::object();
      Pairs& pairs = out.get_ref<Ordered::object_t&>();
      pairs.reserve(j.size());
      // std::map's keys are unique and sorted: nothing to look up.
      for (const auto& [k, v] : j.items()) pairs.emplace_back(k, to_ordered_json(v));
      return out;
    }
    case nlohmann::json::value_t::array: {
      Ordered out = Ordered::array();
      Ordered::array_t& items = out.get_ref<Ordered::array_t&>();
      items.reserve(j.size());
      for (const nlohmann::json& v : j) items.push_back(to_ordered_json(v));
      return out;
    }
    case nlohmann::json::value_t::string:
      return j.get_ref<const std::string&>();
    case nlohmann::json::value_t::boolean:
      return j.get<bool>();
    case nlohmann::json::value_t::number_integer:
      return j.get<int64_t>();
    case nlohmann::json::value_t::number_unsigned:
      return j.get<uint64_t>();
    case nlohmann::json::value_t::number_float:
      return j.get<double>();
    case nlohmann::json::value_t::binary:
      return Ordered::binary(j.get_binary());
    case nlohmann::json::value_t::discarded:
    case nlohmann::json::value_t::null:
      break;
  }
  return Ordered();
}

}  // namespace onecat::chat

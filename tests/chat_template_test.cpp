#include <gtest/gtest.h>

#include "models/chat/chat_template.h"

namespace {
using onecat::chat::ChatTemplate;
std::string render(const std::string& source, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  return ChatTemplate(source).render(vars);
}
TEST(ChatTemplate, Text) { EXPECT_EQ(render("hello"), "hello"); }
}  // namespace

// Python's case mappings and replace on UTF-8 text. Case mapping is implemented for ASCII,
// Latin-1, Latin Extended-A, basic Cyrillic and scripts without case (CJK, symbols, emoji);
// other letters are an error rather than a silently different result.
#pragma once
#include <cstdint>
#include <string>

namespace onecat::chat::text {

std::string upper(const std::string& s);
std::string lower(const std::string& s);
std::string capitalize(const std::string& s);    // str.capitalize()
std::string python_title(const std::string& s);  // str.title()
std::string jinja_title(const std::string& s);   // jinja2's |title filter (splits on spaces and -({[<)
std::string replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count);
std::string html_escape(const std::string& s);  // markupsafe's escape of & < > " '

}  // namespace onecat::chat::text

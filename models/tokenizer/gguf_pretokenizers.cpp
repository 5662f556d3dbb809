#include "models/tokenizer/gguf_pretokenizers.h"

namespace onecat::tokenizer {

namespace {

using nlohmann::json;

json split(const std::string& regex, const char* behaviour = "Isolated") {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", behaviour}, {"invert", false}};
}
json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}
json digits(bool individual) { return {{"type", "Digits"}, {"individual_digits", individual}}; }
json sequence(json steps) { return {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}}; }

// Word patterns of the families, as their tokenizer.json files spell them.
const char* kLlama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* kQwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* kQwen35 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// DeepSeek LLM: cased letters of many scripts, ASCII/full-width punctuation, trailing
// whitespace and CJK runs are split off in turn, then every digit.
// Spelled with \x{…} escapes: several of these code points (U+1FD3, U+212A, …) are
// canonically equivalent to others, and an editor's normalization would silently change them.
const char* kDeepseekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{"
    "2AF}"
    "\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}"
    "\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}"
    "\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}"
    "\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}"
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
    "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
const char* kDeepseekPunctuation =
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+";
const char* kCjk = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

}  // namespace

std::optional<GgufPreTokenizer> gguf_pre_tokenizer(const std::string& name) {
  GgufPreTokenizer p;
  if (name == "gpt-2" || name == "gpt2" || name == "mpt" || name == "olmo" || name == "phi-2" || name == "default") {
    p.pre_tokenizer = byte_level(true);
  } else if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") {
    p.pre_tokenizer = sequence({split(kLlama3), byte_level(false)});
    p.ignore_merges = true;
    p.add_bos_by_default = true;
  } else if (name == "qwen2" || name == "deepseek-r1-qwen") {
    p.pre_tokenizer = sequence({split(kQwen2), byte_level(false)});
    p.normalizer = {{"type", "NFC"}};
  } else if (name == "qwen35") {
    // Unlike Qwen2, no NFC: the pattern keeps combining marks with their letters instead.
    p.pre_tokenizer = sequence({split(kQwen35), byte_level(false)});
  } else if (name == "starcoder" || name == "refact" || name == "command-r" || name == "smollm" ||
             name == "codeshell") {
    p.pre_tokenizer = sequence({digits(true), byte_level(true)});
  } else if (name == "falcon") {
    p.pre_tokenizer = sequence({{{"type", "Punctuation"}, {"behavior", "Contiguous"}},
                                byte_level(true),
                                digits(false),
                                split("[0-9][0-9][0-9]")});
  } else if (name == "deepseek-llm") {
    p.pre_tokenizer = sequence({split("[\r\n]"), split(kDeepseekLetters), split(kDeepseekPunctuation), split("\\s+$"),
                                split(kCjk), digits(true), byte_level(false)});
  } else if (name == "deepseek-coder") {
    p.pre_tokenizer = sequence(
        {split("[\r\n]"), split("\\s?\\p{L}+"), split("\\s?\\p{P}+"), split(kCjk), digits(true), byte_level(false)});
  } else {
    return std::nullopt;
  }
  return p;
}

}  // namespace onecat::tokenizer

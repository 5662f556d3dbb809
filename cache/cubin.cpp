#include "cache/cubin.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/error.h"

namespace onecat {
namespace {

constexpr uint16_t kMachineCuda = 190;  // EM_CUDA
constexpr uint32_t kSymtab = 2;         // SHT_SYMTAB
constexpr uint8_t kFunc = 2;            // STT_FUNC

template <class T>
T at(const std::string& image, uint64_t offset) {
  if (offset > image.size() || image.size() - offset < sizeof(T)) throw Error("an offset points outside the image");
  T v;
  std::memcpy(&v, image.data() + offset, sizeof(T));
  return v;
}

std::string name_at(const std::string& image, uint64_t table, uint64_t table_size, uint32_t offset) {
  if (offset >= table_size || table > image.size() || table_size > image.size() - table) {
    throw Error("a symbol name points outside its string table");
  }
  const char* begin = image.data() + table + offset;
  const char* end = static_cast<const char*>(std::memchr(begin, '\0', size_t(table_size - offset)));
  if (!end) throw Error("a symbol name is not terminated");
  return std::string(begin, end);
}

}  // namespace

bool CubinFacts::built_for(int sm) const {
  return std::find(sm_candidates.begin(), sm_candidates.end(), sm) != sm_candidates.end();
}

bool CubinFacts::defines(const std::string& symbol) const {
  return std::find(functions.begin(), functions.end(), symbol) != functions.end();
}

CubinFacts read_cubin(const std::string& image) {
  if (image.size() < 64 || image.compare(0, 4, "\x7f" "ELF") != 0) throw Error("it is not an ELF image");
  if (image[4] != 2 || image[5] != 1) throw Error("it is not a 64-bit little-endian ELF image");
  if (at<uint16_t>(image, 18) != kMachineCuda) throw Error("it is not CUDA machine code");
  CubinFacts facts;
  const uint32_t flags = at<uint32_t>(image, 48);
  for (int shift : {0, 8, 16}) facts.sm_candidates.push_back(int((flags >> shift) & 0xff));
  const uint64_t shoff = at<uint64_t>(image, 40);
  const uint16_t shentsize = at<uint16_t>(image, 58), shnum = at<uint16_t>(image, 60);
  if (shentsize < 64) throw Error("its section headers are malformed");
  auto section = [&](uint32_t i, uint64_t field) { return shoff + uint64_t(i) * shentsize + field; };
  for (uint32_t i = 0; i < shnum; ++i) {
    if (at<uint32_t>(image, section(i, 4)) != kSymtab) continue;
    const uint64_t offset = at<uint64_t>(image, section(i, 24)), size = at<uint64_t>(image, section(i, 32));
    const uint32_t link = at<uint32_t>(image, section(i, 40));
    const uint64_t entsize = at<uint64_t>(image, section(i, 56));
    if (link >= shnum || entsize < 24) throw Error("its symbol table is malformed");
    const uint64_t strtab = at<uint64_t>(image, section(link, 24)), strsize = at<uint64_t>(image, section(link, 32));
    for (uint64_t s = 0; s + entsize <= size; s += entsize) {
      const uint32_t name = at<uint32_t>(image, offset + s);
      const uint8_t info = at<uint8_t>(image, offset + s + 4);
      if ((info & 0xf) == kFunc) facts.functions.push_back(name_at(image, strtab, strsize, name));
    }
  }
  return facts;
}

}  // namespace onecat

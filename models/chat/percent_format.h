// Python's string formatting. printf-style `text % args` (and jinja2's |format filter):
// %s %r %d %i %f %F %e %E %g %G %x %X %o %c %% with flags, width and precision, over one
// value, a tuple of values or a dict of named values (%(name)s).
#pragma once
#include <string>

#include "models/chat/value.h"

namespace onecat::chat {

std::string percent_format(const std::string& format, const Value& args);

// format(value, spec), as str.format applies a field's spec ("{:>8}", "{:.2f}", "{:+05d}"):
// fill and align, sign, zero padding, width, precision and the types s d x X o c f F e E g G %.
std::string format_with_spec(const Value& value, const std::string& spec);

}  // namespace onecat::chat

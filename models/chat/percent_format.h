// Python's printf-style `text % args` (and jinja2's |format filter, which uses it):
// %s %r %d %i %f %F %e %E %g %G %x %X %o %c %% with flags, width and precision, over one
// value, a tuple of values or a dict of named values (%(name)s).
#pragma once
#include <string>

#include "models/chat/value.h"

namespace onecat::chat {

std::string percent_format(const std::string& format, const Value& args);

}  // namespace onecat::chat

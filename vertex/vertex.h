// The vertex DSL: include this to write a vertex function (see vertex/function.h, Define).
#pragma once

#include "vertex/builder.h"
#include "vertex/function.h"
#include "vertex/ir.h"

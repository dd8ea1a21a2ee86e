# SPDX-License-Identifier: GPL-3.0-or-later
# The layering check (CTest "layering", run as `cmake -DROOT=<source dir> -P tests/layering.cmake`):
# every project include must point down the layer order, core must include no Qt or OpenCL header,
# and gpu and widgets must not include each other. Fails naming each offending file and include.
#
# Order, lowest first: core/common, core/rng, core/io, core/regimes, core/attention, core/lm, core/quant,
# core/metrics, core/stats, core/spec, core/experiment, core/eval, core/analysis, core/report, then gpu and widgets (side by side),
# then app.
# KNOWN would list tolerated upward includes (none since the analyses moved to core/analysis); a
# listed one that is gone fails too, so the list cannot go stale.
cmake_minimum_required(VERSION 3.25)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<source dir> -P layering.cmake")
endif()

set(LAYERS core/common core/rng core/io core/regimes core/attention core/lm core/quant core/metrics core/stats
           core/spec core/experiment core/eval core/analysis core/report gpu widgets app)
set(KNOWN)

function(layer_of path out)
  set(found -1)
  set(i 0)
  foreach(l IN LISTS LAYERS)
    string(LENGTH "${l}/" n)
    string(SUBSTRING "${path}" 0 ${n} head)
    if(head STREQUAL "${l}/")
      set(found ${i})
    endif()
    math(EXPR i "${i} + 1")
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

list(FIND LAYERS gpu gpu_rank)
list(FIND LAYERS widgets widgets_rank)
list(FIND LAYERS core/report core_top)
file(GLOB_RECURSE sources RELATIVE "${ROOT}" "${ROOT}/core/*.h" "${ROOT}/core/*.cpp" "${ROOT}/gpu/*.h" "${ROOT}/gpu/*.cpp"
     "${ROOT}/widgets/*.h" "${ROOT}/widgets/*.cpp" "${ROOT}/app/*.h" "${ROOT}/app/*.cpp")
set(problems "")
set(seen "")
foreach(file IN LISTS sources)
  layer_of("${file}" from)
  file(STRINGS "${ROOT}/${file}" lines REGEX "^#include [\"<]")
  foreach(line IN LISTS lines)
    if(line MATCHES "^#include \"([^\"]+)\"")
      set(header "${CMAKE_MATCH_1}")
      layer_of("${header}" to)
      if(to LESS 0)
        continue()
      endif()
      set(pair "${file} -> ${header}")
      set(sideways FALSE)
      if((from EQUAL gpu_rank AND to EQUAL widgets_rank) OR (from EQUAL widgets_rank AND to EQUAL gpu_rank))
        set(sideways TRUE)
      endif()
      if(to GREATER from OR sideways)
        if(pair IN_LIST KNOWN AND NOT sideways)
          list(APPEND seen "${pair}")
        else()
          string(APPEND problems "  ${pair}\n")
        endif()
      endif()
    elseif(from LESS_EQUAL core_top AND line MATCHES "^#include <(Q[A-Za-z]*|CL/[^>]*)>")
      string(APPEND problems "  ${file} includes <${CMAKE_MATCH_1}>: core uses no Qt or OpenCL\n")
    endif()
  endforeach()
endforeach()
foreach(pair IN LISTS KNOWN)
  if(NOT pair IN_LIST seen)
    string(APPEND problems "  ${pair} is gone: remove it from KNOWN in tests/layering.cmake\n")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "layering: includes against the layer order:\n${problems}")
endif()
list(LENGTH sources count)
list(LENGTH KNOWN known)
message(STATUS "layering: ${count} files, every include points down but the ${known} listed in KNOWN")

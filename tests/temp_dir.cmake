# The temp directory check around the whole suite (CTest fixture refdec_tmp): MODE=before lists
# the refdec* entries of the system temp directory into LIST; MODE=after, which CTest runs after
# every test that requires the fixture, fails on any entry that was not there before: no test may
# leave files outside the build tree.
if(DEFINED ENV{TMPDIR} AND NOT "$ENV{TMPDIR}" STREQUAL "")
  set(tmp "$ENV{TMPDIR}")
else()
  set(tmp "/tmp")
endif()
file(GLOB entries LIST_DIRECTORIES true "${tmp}/refdec*")
if(MODE STREQUAL "before")
  file(WRITE "${LIST}" "${entries}")
  list(LENGTH entries n)
  message(STATUS "${n} refdec* entries in ${tmp} before the suite")
  return()
endif()
file(READ "${LIST}" before)
list(REMOVE_ITEM entries ${before})
if(entries)
  string(REPLACE ";" "\n  " listing "${entries}")
  message(FATAL_ERROR "the suite left these entries in ${tmp}:\n  ${listing}")
endif()
message(STATUS "no new refdec* entries in ${tmp}")

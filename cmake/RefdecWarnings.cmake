# Strict warnings for refdec's own tests, benchmarks and examples; never for consumers.
function(refdec_strict_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Werror>)
endfunction()

# AddressSanitizer + UndefinedBehaviorSanitizer, failing on the first report.
function(refdec_sanitize target)
  target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(${target} PRIVATE -fsanitize=address,undefined)
endfunction()

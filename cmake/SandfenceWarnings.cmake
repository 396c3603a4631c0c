# Warnings are errors for every C++ target of ours (not for generated
# protobuf code, which gets its own relaxed flags in proto/).
function(sandfence_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor -Wno-unused-parameter)
endfunction()

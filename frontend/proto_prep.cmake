# proto_prep.cmake — copies onnx.proto (IN) to OUT in a form protoc-c 1.4
# accepts and that always generates Onnx__* names:
#  - `package <anything>;` becomes `package onnx;` (builds with a custom
#    ONNX_NAMESPACE ship e.g. `package onnx_torch;`);
#  - in a proto3 file, explicit `optional` labels are dropped: protoc-c 1.4
#    refuses proto3 optional fields, and the importer never reads has_* flags.
# Usage: cmake -DIN=onnx.proto -DOUT=build/gen/onnx.proto -P proto_prep.cmake
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "proto_prep.cmake: pass -DIN=... -DOUT=...")
endif()
file(READ "${IN}" text)
if(NOT text MATCHES "message[ \t\r\n]+ModelProto")
  message(FATAL_ERROR "proto_prep.cmake: ${IN} does not define ModelProto; not an onnx.proto")
endif()
string(REGEX REPLACE "(^|\n)([ \t]*)package[ \t]+[A-Za-z0-9_.]+[ \t]*;" "\\1\\2package onnx;" text "${text}")
if(text MATCHES "syntax[ \t]*=[ \t]*\"proto3\"")
  string(REGEX REPLACE "(^|[\n;{])([ \t]*)optional[ \t]+" "\\1\\2" text "${text}")
endif()
file(WRITE "${OUT}" "${text}")

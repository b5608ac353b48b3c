// A planted violation for tools/lint/check_layers_test.py: a file outside every layer folder.
#pragma once

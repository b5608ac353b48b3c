// A planted violation for tools/lint/check_layers_test.py: a file outside the three library folders.
#pragma once

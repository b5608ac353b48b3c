// A planted violation for tools/check_layers_test.py: a file outside the three library folders.
#pragma once

// A planted violation for tools/check_layers_test.py: a file outside every layer folder.
#pragma once

// Planted: a C++ file directly in tools/, in no room.

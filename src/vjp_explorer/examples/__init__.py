"""The bundled expression files (TOML); shipped as package data `vjp_explorer.examples`."""

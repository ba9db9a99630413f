/* drivers.h: the drivers' texts, generated at build time into code-drivers.c
 * (cmake/EmbedDrivers.cmake) from src/code/drivers/. */
#pragma once

extern const char sh_code_driver_python[];
extern const char sh_code_driver_javascript[];
extern const char sh_code_driver_bash[];

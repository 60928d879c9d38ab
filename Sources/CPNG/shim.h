// libpng reports errors through longjmp, which Swift cannot catch: the helpers below wrap the
// setjmp so a corrupt file becomes an error code instead of a crash.
#include <png.h>

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/hmac.h>

// The console's static files (console/assets/), compiled in by
// console/CMakeLists.txt (cmake/embed_asset.cmake makes one .cc per file).
#ifndef PARTQ_CONSOLE_ASSETS_H_
#define PARTQ_CONSOLE_ASSETS_H_

namespace partq::console::assets {

extern const char kIndexHtml[];  // index.html: %CSRF% and %MODE% filled in per process
extern const char kLoginHtml[];  // login.html: %CSRF% and %MESSAGE%
extern const char kAppJs[];      // app.js
extern const char kAppCss[];     // app.css

}  // namespace partq::console::assets

#endif  // PARTQ_CONSOLE_ASSETS_H_

// Draws the reference from this server's own OpenAPI document with the embedded Redoc.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  Redoc.init("/openapi.json", {
    expandResponses: "200",
    jsonSampleExpandLevel: 4,
    hideDownloadButton: false,
    nativeScrollbars: true,
    pathInMiddlePanel: true,
    requiredPropsFirst: true,
    theme: { colors: { primary: { main: "#1f4f8f" } } },
  }, document.getElementById("redoc"));
});

import { fileURLToPath } from "node:url";

import { defineConfig } from "vitest/config";

const here = (path: string): string => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  resolve: {
    alias: {
      "@engram/client": here("../clients/typescript/src/index.ts"),
      "openapi-fetch": here("./node_modules/openapi-fetch/dist/index.mjs"),
    },
  },
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
    testTimeout: 120_000,
  },
});

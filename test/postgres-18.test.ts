import { suitesFor } from "./suite/index.js"

suitesFor("postgres-18")

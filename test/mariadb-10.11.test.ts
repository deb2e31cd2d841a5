import { suitesFor } from "./suite/index.js"

suitesFor("mariadb-10.11")

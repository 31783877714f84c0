package i18n

import (
	"golang.org/x/text/feature/plural"
	"golang.org/x/text/message/catalog"
)

// messages is the catalog: the English key, then Portuguese (Brazil) and
// Spanish (Paraguay). Keep it sorted by where the message is used.
var messages = [][3]string{
	// layout and navigation
	{"signed in as", "conectado como", "sesión de"},
	{"a SQL-backed throttle for DICT and SIFEN", "um limitador em SQL para o DICT e o SIFEN", "un limitador en SQL para DICT y SIFEN"},
	{"request", "requisição", "solicitud"},
	{"Buckets", "Baldes", "Baldes"},
	{"Documents", "Documentos", "Documentos"},
	{"DICT lookup", "Consulta DICT", "Consulta DICT"},
	// severities and states
	{"Healthy", "Saudável", "Saludable"},
	{"Medium", "Médio", "Medio"},
	{"High", "Alto", "Alto"},
	{"Critical", "Crítico", "Crítico"},
	{"Unknown", "Desconhecido", "Desconocido"},
	{"Unknown policy", "Política desconhecida", "Política desconocida"},
	{"blocked", "bloqueado", "bloqueado"},
	{"cooling down", "em espera", "en espera"},
	{"negative", "negativo", "negativo"},
	{"any", "qualquer", "cualquiera"},
	{"Blocked", "Bloqueados", "Bloqueados"},
	{"Negative", "Negativos", "Negativos"},
	// the bucket list
	{"Bucket states", "Estado dos baldes", "Estado de los baldes"},
	{"SIFEN lot polling", "Consultas de lote SIFEN", "Consultas de lote SIFEN"},
	{"Policy", "Política", "Política"},
	{"Env", "Ambiente", "Ambiente"},
	{"Identifier starts with", "Identificador começa com", "Identificador empieza con"},
	{"Severity now", "Severidade agora", "Severidad ahora"},
	{"State", "Estado", "Estado"},
	{"Sort", "Ordem", "Orden"},
	{"Per page", "Por página", "Por página"},
	{"Filter", "Filtrar", "Filtrar"},
	{"Clear", "Limpar", "Limpiar"},
	{"Auto-refresh", "Atualizar sozinho", "Actualizar solo"},
	{"Stop auto-refresh", "Parar de atualizar", "Dejar de actualizar"},
	{"key", "chave", "clave"},
	{"severity (worst first)", "severidade (pior primeiro)", "severidad (peor primero)"},
	{"last send (newest first)", "último envio (mais recente primeiro)", "último envío (más reciente primero)"},
	{"fill (emptiest first)", "nível (mais vazio primeiro)", "nivel (más vacío primero)"},
	{"Scope", "Escopo", "Ámbito"},
	{"Identifier", "Identificador", "Identificador"},
	{"Tokens", "Fichas", "Fichas"},
	{"Capacity", "Capacidade", "Capacidad"},
	{"Refill", "Recarga", "Recarga"},
	{"Fill", "Nível", "Nivel"},
	{"Severity", "Severidade", "Severidad"},
	{"Cooldown / block", "Espera / bloqueio", "Espera / bloqueo"},
	{"Last send", "Último envio", "Último envío"},
	{"Sends", "Envios", "Envíos"},
	{"never", "nunca", "nunca"},
	{"%s ago", "há %s", "hace %s"},
	{"in %s", "em %s", "en %s"},
	{"now", "agora", "ahora"},
	{"of", "de", "de"},
	{"balance", "saldo", "saldo"},
	{"capacity", "capacidade", "capacidad"},
	{"unknown policy", "política desconhecida", "política desconocida"},
	{"No stored bucket matches. A key with no stored row is a full bucket.", "Nenhum balde guardado corresponde. Uma chave sem linha guardada é um balde cheio.", "Ningún balde guardado coincide. Una clave sin fila guardada es un balde lleno."},
	{"« First page", "« Primeira página", "« Primera página"},
	{"‹ Previous", "‹ Anterior", "‹ Anterior"},
	{"Next ›", "Próxima ›", "Siguiente ›"},
	{"Page %d (rows %d–%d)", "Página %d (linhas %d–%d)", "Página %d (filas %d–%d)"},
	{"The filter read %d stored rows without filling the page; the next page continues from there.", "O filtro leu %d linhas sem completar a página; a próxima página continua dali.", "El filtro leyó %d filas sin completar la página; la página siguiente continúa desde allí."},
	// the summary
	{"stored buckets", "baldes guardados", "baldes guardados"},
	{"refusals in the last hour", "recusas na última hora", "rechazos en la última hora"},
	{"All buckets, as of %s. Severity is computed now; a key with no stored row is a full bucket and is not counted.", "Todos os baldes, em %s. A severidade é calculada agora; uma chave sem linha guardada é um balde cheio e não é contada.", "Todos los baldes, a las %s. La severidad se calcula ahora; una clave sin fila guardada es un balde lleno y no se cuenta."},
	// the bucket page
	{"Balance over time", "Saldo ao longo do tempo", "Saldo en el tiempo"},
	{"Recent ledger", "Registro recente", "Registro reciente"},
	{"last hour", "última hora", "última hora"},
	{"last day", "último dia", "último día"},
	{"last week", "última semana", "última semana"},
	{"refusals", "recusas", "rechazos"},
	{"Next request of 1 token", "Próxima requisição de 1 ficha", "Próxima solicitud de 1 ficha"},
	{"Full again", "Cheio de novo", "Lleno de nuevo"},
	{"Stored", "Guardado", "Guardado"},
	{"Reset this bucket…", "Reiniciar este balde…", "Reiniciar este balde…"},
	{"When", "Quando", "Cuándo"},
	{"Reason", "Motivo", "Motivo"},
	{"Change", "Variação", "Cambio"},
	{"Balance", "Saldo", "Saldo"},
	{"Events", "Eventos", "Eventos"},
	{"Reference", "Referência", "Referencia"},
	{"yes", "sim", "sí"},
	{"none", "nenhum", "ninguno"},
	{"no row: the bucket is full", "sem linha: o balde está cheio", "sin fila: el balde está lleno"},
	// summary panels (their titles and labels)
	{"DICT participant", "Participante DICT", "Participante DICT"},
	{"Category", "Categoria", "Categoría"},
	{"Anti-scan bucket", "Balde antivarredura", "Balde antiescaneo"},
	{"DICT anti-scan monitors (24 h)", "Monitores antivarredura do DICT (24 h)", "Monitores antiescaneo del DICT (24 h)"},
	{"Lookups", "Consultas", "Consultas"},
	{"SIFEN documents", "Documentos SIFEN", "Documentos SIFEN"},
	{"Payment orders", "Ordens de pagamento", "Órdenes de pago"},
	{"Lookups per payment order", "Consultas por ordem de pagamento", "Consultas por orden de pago"},
	{"404 share per participant", "Parcela de 404 por participante", "Proporción de 404 por participante"},

	// balde buckets and balde prune (LANG)
	{"no stored bucket matches (a key with no row is a full bucket)", "nenhum balde guardado corresponde (uma chave sem linha é um balde cheio)", "ningún balde guardado coincide (una clave sin fila es un balde lleno)"},
	{"POLICY\tIDENTIFIER\tENV\tTOKENS\tSEVERITY\tSTATE\tLAST SEND", "POLÍTICA\tIDENTIFICADOR\tAMBIENTE\tFICHAS\tSEVERIDADE\tESTADO\tÚLTIMO ENVIO", "POLÍTICA\tIDENTIFICADOR\tAMBIENTE\tFICHAS\tSEVERIDAD\tESTADO\tÚLTIMO ENVÍO"},
	{"POLICY\tSCOPE\tIDENTIFIER\tENV\tTOKENS\tCAPACITY\tREFILL\tSEVERITY\tCOOLDOWN/BLOCK\tLAST SEND\tSENDS", "POLÍTICA\tESCOPO\tIDENTIFICADOR\tAMBIENTE\tFICHAS\tCAPACIDADE\tRECARGA\tSEVERIDADE\tESPERA/BLOQUEIO\tÚLTIMO ENVIO\tENVIOS", "POLÍTICA\tÁMBITO\tIDENTIFICADOR\tAMBIENTE\tFICHAS\tCAPACIDAD\tRECARGA\tSEVERIDAD\tESPERA/BLOQUEO\tÚLTIMO ENVÍO\tENVÍOS"},
	{"more: add --after %s", "há mais: acrescente --after %s", "hay más: agregue --after %s"},
	{"Reset %s to %s tokens and clear its cooldown and block, as %s? [y/N] ", "Reiniciar %s para %s fichas e limpar a espera e o bloqueio, como %s? [y/N] ", "¿Reiniciar %s a %s fichas y quitar la espera y el bloqueo, como %s? [y/N] "},
	{"reset %s: %s → %s tokens, cooldown and block cleared (by %s)", "%s reiniciado: %s → %s fichas, espera e bloqueio limpos (por %s)", "%s reiniciado: %s → %s fichas, espera y bloqueo quitados (por %s)"},
	{"removed", "removidos", "eliminados"},
	{"dry run: would remove", "simulação: removeria", "simulación: eliminaría"},
	{"%s %s ledger rows and %s DICT lookups older than %s (before %s)", "%s %s linhas do registro e %s consultas DICT com mais de %s (antes de %s)", "%s %s filas del registro y %s consultas DICT de más de %s (antes de %s)"},
	{"idle buckets kept (--skip-buckets)", "baldes ociosos mantidos (--skip-buckets)", "baldes ociosos conservados (--skip-buckets)"},
	{"%s %s idle buckets (full, no cooldown or block: the same as no row)", "%s %s baldes ociosos (cheios, sem espera nem bloqueio: o mesmo que nenhuma linha)", "%s %s baldes ociosos (llenos, sin espera ni bloqueo: lo mismo que ninguna fila)"},
}

// pluralForm is a message with plural forms per language (English,
// Portuguese, Spanish).
type pluralForm struct {
	key   string
	forms [3]catalog.Message
}

var plurals = []pluralForm{
	{"%d lot-polling buckets are on their own tab", [3]catalog.Message{
		plural.Selectf(1, "%d", "=1", "1 lot-polling bucket is on its own tab", "other", "%d lot-polling buckets are on their own tab"),
		plural.Selectf(1, "%d", "=1", "1 balde de consulta de lote está na sua própria aba", "other", "%d baldes de consulta de lote estão na sua própria aba"),
		plural.Selectf(1, "%d", "=1", "1 balde de consulta de lote está en su propia pestaña", "other", "%d baldes de consulta de lote están en su propia pestaña"),
	}},
}

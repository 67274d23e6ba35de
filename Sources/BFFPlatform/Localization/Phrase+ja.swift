/// The message catalogue in Japanese, the default language (requirements §2.3). Sentences are
/// polite (です・ます) and short; field names, codes and identifiers stay in ASCII as the contract
/// spells them.
extension Phrase {
    var japanese: String {
        switch self {
        case .error(let code): code.japanese
        case .invalid(let field, let problem): "\(field): \(problem.japanese)"
        case .bearerTokenRequired: "Bearer アクセストークンが必要です。"
        case .accountGone: "このトークンのアカウントはもう存在しません。"
        case .sessionEnded: "このセッションは終了しています。もう一度サインインしてください。"
        case .scopesNeeded(let names, _): "この操作にはスコープ \(names) が必要です。"
        case .methodsAllowed(let allow): "このパスで使えるメソッドは \(allow) です。"
        case .chatChangedMeanwhile: "お手元のコピーの後にチャットが変更されました（updated_at）。再読み込みしてからやり直してください。"
        case .noSuchRecall: "その復習は見つかりません。"
        case .tutorNotConfigured: "このサーバーでは AI チューターが設定されていません。"
        case .turnNotStoredShuttingDown: "サーバーが停止処理中のため、この発言は保存されていません。もう一度送信してください。"
        case .purchasesNotConfigured: "このサーバーでは購入機能が設定されていません。"
        case .webhookNotConfigured: "このサーバーでは RevenueCat Webhook が設定されていません（BFF_REVENUECAT_WEBHOOK_AUTH）。"
        case .contractFileMissing: "このサーバーは API 定義ファイルなしで起動されています（BFF_OPENAPI_FILE）。"
        case .schemaBehind(let version, let missing):
            "データベースのスキーマはバージョン \(version) で、このビルドのマイグレーションが \(missing) 件適用されていません。bff migrate を実行してください。"
        case .appVersionUnsupported(let version, let minimum):
            "バージョン \(version) はサポートを終了しました。ストアから \(minimum) 以降に更新してください。"
        case .tooMany(let what, let seconds):
            switch what {
            case .requests: "リクエストが多すぎます。\(seconds) 秒後にもう一度お試しください。"
            case .sessionRefreshes: "このセッションの更新が多すぎます。\(seconds) 秒後にもう一度お試しください。"
            case .concurrentExports: "データの書き出しはすでに実行中です。\(seconds) 秒後にもう一度お試しください。"
            }
        case .featureNeedsPlan(let feature, let plan):
            switch feature {
            case .instantQuestions: "すぐに質問する機能には \(plan) プランが必要です。"
            }
        case .dailyTurnsUsed(let plan, let allowed):
            "\(plan) プランで 1 日に使える AI とのやり取りは \(allowed) 回までです。日付が変わるとまた使えます。"
        case .announcement(let text): text
        case .formFieldWithoutValue: "フォームの形式が正しくありません。すべての項目に値が必要です。"
        case .queryParameterWithoutValue: "クエリ文字列の形式が正しくありません。すべてのパラメーターに値が必要です。"
        case .jsonBodyRequired: "JSON のリクエスト本文が必要です。"
        // The library's account of the parameter is English: the catalogue's sentence stands in.
        case .requestOutsideContract: ErrorCode.validationFailed.japanese
        case .untitledChat(let createdAt): "チャット \(createdAt)"
        case .untitledTurnChat: "チャット"
        case .instantQuestionChat(let about): "\(about)の質問"
        case .recallPushTitle: "復習の時間です"
        case .recallPushBody(let topic): topic.map { "「\($0)」をもう一度説明してみよう" } ?? "前に学んだことをもう一度説明してみよう"
        case .trophyName(let trophy):
            switch trophy {
            case .firstExplanation: "はじめての説明"
            case .streak3: "3日連続で学習"
            case .streak7: "7日連続で学習"
            case .streak30: "30日連続で学習"
            case .firstRecall: "はじめての復習"
            case .recalls10: "復習10回"
            case .tagMastered: "つまずきを克服"
            case .subjectMastered: "教科のつまずきを全部克服"
            }
        case .streakPushTitle: "連続記録が途切れそう！"
        case .streakPushBody(let days): "今日はまだ学習していません。1つ説明して、\(days + 1)日連続にしよう！"
        }
    }
}

extension ErrorCode {
    var japanese: String {
        switch self {
        case .badRequest: "リクエストの形式が正しくありません。"
        case .invalidJSON: "リクエスト本文が正しい JSON ではありません。"
        case .invalidForm: "フォームの形式が正しくありません。"
        case .invalidState: "このログインは存在しないか、期限切れか、すでに使われています。最初からやり直してください。"
        case .invalidGrant: "code_verifier がこのログインと一致しません。最初からやり直してください。"
        case .invalidRedirectURI: "redirect_uri はこのアプリに登録されていません。"
        case .invalidLogoutToken: "ログアウトトークンが正しくありません。"
        case .notAcceptable: "この API は application/json でのみ応答します。Accept に application/json か */* を指定してください。"
        case .invalidToken: "アクセストークンがないか、期限切れか、正しくありません。"
        case .refreshReused: "このリフレッシュトークンはすでに使われています。安全のためセッションを無効にしました。"
        case .refreshExpired: "リフレッシュトークンの期限が切れました。もう一度サインインしてください。"
        case .invalidRefreshToken: "リフレッシュトークンが正しくありません。"
        case .sessionRevoked: "このセッションは無効にされました。もう一度サインインしてください。"
        case .idpRejected: "認証サービスがこのログインを受け付けませんでした。"
        case .webhookUnauthorized: "Authorization ヘッダーがこの Webhook に設定されたものと一致しません。"
        case .insufficientScope: "アクセストークンにこの操作に必要なスコープがありません。"
        case .originNotAllowed: "セッション Cookie で認証するリクエストは、許可されたオリジンから送る必要があります。"
        case .planRequired: "この機能には上位のプランが必要です。"
        case .reauthenticationRequired: "この操作には直近のサインインが必要です。もう一度サインインしてからやり直してください。"
        case .notFound: "指定されたリソースは存在しません。"
        case .methodNotAllowed: "このパスはこのメソッドを受け付けません。"
        case .staleUpdate: "お手元のコピーの後に変更されています。再読み込みしてからやり直してください。"
        case .idempotencyInProgress: "この Idempotency-Key のリクエストはまだ処理中です。少し待ってからやり直してください。"
        case .recallDone: "この復習はすでに評価済みです。"
        case .recallCanceled: "この復習は取り消されました。元のチャットが削除されています。"
        case .chatEnded: "このチャットは終了しました。新しいチャットを始めてください。"
        case .payloadTooLarge: "リクエスト本文が大きすぎます。"
        case .unsupportedMediaType: "本文は application/json で送ってください。"
        case .validationFailed: "リクエストが API の定義に合っていません。"
        case .invalidCursor: "cursor はこの一覧とその絞り込み条件のものではありません。"
        case .idempotencyKeyReused: "この Idempotency-Key は別のリクエスト本文で使われています。"
        case .unknownSubject: "その教科は存在しません。"
        case .unknownTopic: "その単元は存在しません。"
        case .contentFiltered: "この内容には AI チューターが答えられません。言い方を変えて送ってください。"
        case .invalidReceipt: "ストアがこのレシートを受け付けませんでした。"
        case .upgradeRequired: "このバージョンのアプリはサポートを終了しました。ストアから更新してください。"
        case .rateLimited: "リクエストが多すぎます。しばらくしてからもう一度お試しください。"
        case .quotaExceeded: "今日のプランの利用上限に達しました。"
        case .internal: "内部エラーが発生しました。リクエスト ID とともに記録されています。"
        case .databaseUnavailable: "データベースに接続できません。少し待ってからもう一度お試しください。"
        case .idpUnavailable: "認証サービスに接続できません。少し待ってからもう一度お試しください。"
        case .llmUnavailable: "AI チューターに接続できません。少し待ってからもう一度お試しください。"
        case .storeUnavailable: "ストアに接続できません。少し待ってからもう一度お試しください。"
        case .notReady: "サービスの準備ができていません。"
        case .maintenance: "ただいまメンテナンス中です。しばらくしてからもう一度お試しください。"
        }
    }
}

extension Phrase.Problem {
    var japanese: String {
        switch self {
        case .mustBeJSON: "JSON で送ってください。"
        case .mustBeForm: "フォーム形式で送ってください。"
        case .mustBeUUID: "UUID で指定してください。"
        case .mustBeInteger: "整数で指定してください。"
        case .required: "必須です。"
        case .mustNotBeBlank: "空にはできません。"
        case .invalidValue: "値が正しくありません。"
        case .undecodable: "読み取れませんでした。"
        case .mustBeOfType(let type): "\(type) 型で指定してください。"
        case .mustBeNonNull(let type): "null ではない \(type) 型で指定してください。"
        case .between(let low, let high): "\(low) 以上 \(high) 以下で指定してください。"
        case .atMostCharacters(let count): "\(count) 文字以内で指定してください。"
        case .lengthBetween(let low, let high): "\(low)〜\(high) 文字で指定してください。"
        case .titleLength: "前後の空白を除いて 1〜200 文字で指定してください。"
        case .noControlCharacters: "制御文字は使えません。"
        case .noNULCharacters: "NUL 文字は使えません。"
        case .atMostEntries(let count): "\(count) 件以内で指定してください。"
        case .appearsTwice: "同じものが 2 回指定されています。"
        case .atMostDistinctTopics(let count): "単元は重複なしで \(count) 件以内で指定してください。"
        case .notRFC3339(let text):
            "\"\(text)\" は RFC 3339 の日時ではありません（YYYY-MM-DDThh:mm:ss[.小数] と Z または ±hh:mm、西暦 0001〜9999 年）。"
        case .yearOutOfRange: "西暦 0001〜9999 年の日時で指定してください。"
        case .appVersionShape: "1.4.0 のようなバージョンで指定してください。"
        case .regionShape: "JP のような 2 文字の地域コードで指定してください。"
        case .idempotencyKeyShape: "表示可能な ASCII 文字 1〜255 文字で指定してください。"
        case .timeOfDayShape: "HH:MM 形式の時刻で指定してください。"
        case .timeZoneShape: "Asia/Tokyo のような IANA タイムゾーンで指定してください。"
        case .windowEndEqualsStart: "start と違う時刻を指定してください（start より前の end は日付をまたぐ意味になります）。"
        case .deviceIDShape: "A-Z a-z 0-9 . _ : - の 8〜128 文字で指定してください。"
        case .codeChallengeShape: "アプリの verifier の S256 チャレンジ（A-Z a-z 0-9 - _ の 43 文字）で指定してください。"
        case .authorizationCodeShape: "表示可能な ASCII 文字 1〜2048 文字で指定してください。"
        case .stateShape: "A-Z a-z 0-9 - _ の 1〜256 文字で指定してください。"
        case .refreshTokenShape: "base64url の 43 文字で指定してください。"
        case .notThisSessionsDevice: "このセッションでサインインした端末を指定してください。"
        case .pushProviderChoice: "apns、fcm、null のいずれかで指定してください。"
        case .apnsFromIOSOnly: "apns のトークンは iOS 端末のものに限られます。"
        case .apnsTokenShape: "APNs のトークンは 64〜200 桁（偶数桁）の 16 進数です。"
        case .fcmTokenShape: "A-Z a-z 0-9 _ : - の 64〜2048 文字で指定してください。"
        case .productIDShape: "英数字と . _ - の 1〜200 文字で指定してください。"
        case .receiptShape: "ストアのレシートか購入トークン（base64 またはトークン文字で 60,000 文字以内）で指定してください。"
        case .requiredForTurn: "mode turn では必須です。"
        case .questionOnly: "mode question でのみ指定できます。"
        case .leftOutWithQuestionAIAsks: "mode question では指定しないでください（AI が質問します）。"
        case .leftOutWithQuestionStartsChat: "mode question では指定しないでください（新しいチャットが始まります）。"
        case .requiredWithQuestion: "mode question では必須です。"
        case .noSuchSubject: "その教科は存在しません。"
        case .noSuchTopic: "その単元は存在しません。"
        case .topicOfAnotherSubject: "その単元は別の教科のものです。"
        case .notATopicOf(let topic, let subject): "\(topic) は \(subject) の単元ではありません。"
        }
    }
}
